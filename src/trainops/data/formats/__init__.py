"""Record formats: RecordIO, TFRecord (with ``tf.train.Example``) and text lines.

Each reader parses a binary stream read in large blocks (``_blocks``) and reports a corrupt
record with the source and byte offset (``trainops.data._errors``). The public names are
exported by :mod:`trainops.data`; the modules here import nothing from the other parts of the
data library.
"""
