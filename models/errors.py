"""Domain errors. `api/` maps them to HTTP status codes and exit codes in one place."""


class InvalidSpec(ValueError):
    """A model, cluster, training or layout spec that cannot describe a real run.

    `field` names the offending request field (dotted path) when one is to blame.
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class UnknownPreset(InvalidSpec):
    """A preset name that is not in the catalogue."""
