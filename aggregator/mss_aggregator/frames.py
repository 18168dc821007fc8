"""pandas, optional: the results' ``to_frame()`` views import it here, on first use."""


def require_pandas():
    """The pandas module.

    Returns
    -------
    module
        ``pandas``.

    Raises
    ------
    ImportError
        pandas is not installed, saying that only the DataFrame views need it.
    """
    try:
        import pandas
    except ImportError as exc:
        raise ImportError("to_frame() needs pandas (pip install pandas); to_dict() needs nothing") from exc
    return pandas
