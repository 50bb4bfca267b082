"""An example Veil plugin: importing `veil_plugin_example.method` registers the `mean-nulling` method, importing
`veil_plugin_example.dataset` the `tilted-blobs` dataset, importing `veil_plugin_example.sampler` the `qmc`
sweep sampler, importing `veil_plugin_example.probe` the `knn` audit probe. Veil imports them through the entry points in
pyproject.toml; nothing here is imported by Veil's own code."""
