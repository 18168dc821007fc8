"""A toy protocol outside the project, registered as a package would be.

``register()`` is this package's entry point in the group ``mss_iot.protocols``
(``../mss_toy-0.1.dist-info/entry_points.txt``): with this folder on the
path, every process that imports :mod:`mss_protocol.registry` has ``toy``.
Host module :mod:`.protocol`, device module :mod:`.device`, vectors in
``vectors/``.
"""


def register():
    from mss_protocol import registry

    registry.register("toy", "mss_toy.protocol:Toy", "mss_toy.device", ("t",))
