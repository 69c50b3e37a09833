"""Job loading: a job, pipeline or sweep file read into `distrun.spec`'s models and checked
against this machine (its input paths, data assets, output places, environments).

Its own layer, above data, environments and store, which the checks read; the models below
in `distrun.spec` import none of them."""
