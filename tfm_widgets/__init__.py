"""Interactive widgets of the book (ipywidgets + matplotlib), one module per topic.

Each widget function takes an optional student function (``attention_explorer(fn=my_attention)``;
``None`` means the tfm_ref one) and returns a `display.LiveWidget`: live controls in Jupyter,
and a static snapshot of its initial state on the book's pages. Import the topic module,
e.g. ``from tfm_widgets.attention import attention_explorer``.
"""
