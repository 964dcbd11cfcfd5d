__all__: list[str] = []  # a public path with no names of its own: its modules are internal (docs/design.rst)
