"""Small CPU reproductions of published results, used by the topic notebooks.

Each module trains its models, returns plain numbers and draws the figure; the notebooks call them
and assert the paper's qualitative result. ``tests/workbook/test_papers_*.py`` test them.
"""
