"""Sphinx extension of the gradlab book (docs/conf.py): inline code naming an API becomes a link.

- Inline code naming a public TensorFlow or Keras API (``tf.custom_gradient``, ``@tf.custom_gradient``,
  ``tf.stop_gradient(x)``, ``keras.layers.Layer``, ``tf.compat.v1.py_func``) links to its page on
  tensorflow.org. docs/_ext/tf_api.py decides, from the installed (pinned) TensorFlow and Keras:
  nothing is fetched and no name is guessed (``tf.py_func``, TF1 only, stays plain code).
- Inline code naming a documented ``gradlab.*`` object links to its entry in the book's API
  reference (the Python domain's objects, which autodoc fills). A translated edition has no API page
  of its own: it links to the English one, read from the English run's ``objects.inv``
  (``gradlab_api_inventory``).

Code in headings (the tables of contents repeat them), in existing links and in API signatures
is left alone.
"""
from __future__ import annotations

import re
import zlib
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.transforms.post_transforms import SphinxPostTransform

import tf_api

GRADLAB = re.compile(r"@?(?P<name>gradlab(?:\.[A-Za-z][A-Za-z0-9_]*)+)(?:\((?:[^()]|\([^()]*\))*\))*")
# Inline code there is never made a link: headings, existing links, API signatures, code blocks.
_NO_LINK = (nodes.title, nodes.reference, addnodes.pending_xref, addnodes.desc_signature, nodes.FixedTextElement)


class ApiLinks(SphinxPostTransform):
    """Inline code naming a public TF/Keras API or a documented gradlab object becomes a link."""

    default_priority = 900

    def run(self, **kwargs) -> None:
        objects = self.env.get_domain("py").objects
        for literal in list(self.document.findall(nodes.literal)):
            if type(literal) is not nodes.literal or self._inside(literal, _NO_LINK):
                continue
            text = literal.astext().strip()
            url, internal = tf_api.api_url(text), False
            match = GRADLAB.fullmatch(text)
            if url is None and match and match.group("name") in objects:
                entry = objects[match.group("name")]
                url = self.app.builder.get_relative_uri(self.env.docname, entry.docname) + "#" + entry.node_id
                internal = True
            elif url is None and match and match.group("name") in (english := english_api(self.app)):
                # The English API page, one folder above this edition's root.
                url = "../" * (self.env.docname.count("/") + 1) + english[match.group("name")]
                internal = True
            if url is None:
                continue
            reference = nodes.reference("", "", literal.deepcopy(), refuri=url, internal=internal,
                                        classes=["api-link"])
            if not internal:
                reference["reftitle"] = "TensorFlow API documentation"
            literal.replace_self(reference)

    @staticmethod
    def _inside(node: nodes.Node, kinds: tuple) -> bool:
        parent = node.parent
        while parent is not None:
            if isinstance(parent, kinds):
                return True
            parent = parent.parent
        return False


def english_api(app) -> dict[str, str]:
    """The Python objects of the English API reference (``gradlab_api_inventory``, an ``objects.inv``):
    name -> its URL from the English site's root. Empty for the English run itself."""
    if not app.config.gradlab_api_inventory:
        return {}
    if not hasattr(app, "_gradlab_english_api"):
        lines = Path(app.config.gradlab_api_inventory).read_bytes().split(b"\n", 4)
        objects = {}
        for line in zlib.decompress(lines[4]).decode().splitlines():
            found = re.match(r"(\S+)\s+py:\w+\s+-?\d+\s+(\S+)", line)
            if found:
                name, uri = found.groups()
                objects[name] = uri[:-1] + name if uri.endswith("$") else uri
        app._gradlab_english_api = objects
    return app._gradlab_english_api


def setup(app):
    app.add_config_value("gradlab_api_inventory", "", "env")
    app.add_post_transform(ApiLinks)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
