"""An example Veil plugin: importing `veil_plugin_example.method` registers the `mean-nulling` method, importing
`veil_plugin_example.dataset` the `tilted-blobs` dataset. Veil imports both through the entry points in
pyproject.toml; nothing here is imported by Veil's own code."""
