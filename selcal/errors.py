"""The one exception type selcal raises for input a user must fix."""


class SelcalError(Exception):
    """Bad input or options: the message says what, where (file, column, row) and what to do.

    The CLI prints it as one line on stderr and exits with status 2.
    """
