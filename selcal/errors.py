"""The one exception type selcal raises for input a user must fix."""


class SelcalError(Exception):
    """Bad input or options: the message says what, where (file, column, row) and what to do.

    The CLI prints it as one line on stderr and exits with status 2.
    """


class OptionError(SelcalError):
    """A bad option value. The message names the option as its caller calls it: ``bins`` from
    Python, ``--bins`` from the command line (:meth:`named`), from one validation.
    """

    def __init__(self, option: str, template: str):
        self.option = option
        self.template = template  # holds "{option}" where the option's name goes; any other brace is text
        super().__init__(template.replace("{option}", option))

    def named(self, name: str) -> "OptionError":
        """The same error, naming the option ``name`` (e.g. the command-line flag)."""
        error = OptionError(self.option, self.template)
        error.args = (self.template.replace("{option}", name),)
        return error

    def __str__(self) -> str:
        return str(self.args[0])


class ModelsFailed(SelcalError):
    """Some models could not be evaluated; every other one was. ``messages``: one per failed model,
    naming its file (the message is those lines)."""

    def __init__(self, messages):
        self.messages = list(messages)
        super().__init__("\n".join(self.messages))
