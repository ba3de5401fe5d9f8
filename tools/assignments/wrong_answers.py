"""Typical wrong answers for `make test-assignments`: substitutions in the instructor's solution.

One mistake per sampled notebook, each one its self-check's tests already show being refused
(``tests/workbook/test_exercises_<topic>.py``): ``{notebook: {exercise: (mistake, solution text, wrong text)}}``.
The grading sample hands in the instructor's solutions with these replaced, and expects the
exercise named here to score 0 and every other exercise full marks.
"""

WRONG_ANSWERS = {
    # tests/workbook/test_exercises_start_here.py: "clipped first, then scaled"
    "00_start_here": {1: ("clip first, then scale",
                          "tf.clip_by_value(factor * dy, -bound, bound)",
                          "factor * tf.clip_by_value(dy, -bound, bound)")},
    # tests/workbook/test_exercises_keras_layers.py: an identity layer, "should receive half of it"
    "03_keras_layers": {1: ("a layer that keeps the gradient",
                            "outputs = HalveGradient()(inputs)",
                            "outputs = keras.layers.Identity()(inputs)")},
    # tests/workbook/test_exercises_recipes.py: a clamp instead of the double where, "values are not log(x)"
    "13_recipes": {1: ("log of a clamped x",
                       "return tf.where(positive, tf.math.log(tf.where(positive, x, 1.0)), 0.0)",
                       "return tf.math.log(tf.maximum(x, 1e-30))")},
}
