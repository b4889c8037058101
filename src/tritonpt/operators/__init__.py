"""What each libtorch registers (``registry``), what a model file calls (``calls``), and which of those calls a
libtorch lacks (``predict``): per model, not per version pair. Read by the doctor, migrate --ngc and compat."""
