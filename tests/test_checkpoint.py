"""Orbax helpers: what a failed restore leaves in the logs."""


def test_abandoned_orbax_reads_are_not_logged_by_asyncio_but_other_records_are():
    import logging
    import sys

    from curriculax.checkpoint import _AbandonedOrbaxRead

    def error_from(filename):
        namespace = {}
        exec(compile("def f():\n    raise OSError('read failed')\n", filename, "exec"), namespace)
        try:
            namespace["f"]()
        except OSError:
            return sys.exc_info()

    def record(msg, exc_info):
        return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, msg, None, exc_info)

    keep = _AbandonedOrbaxRead().filter
    orbax = error_from("/site-packages/orbax/checkpoint/serialization.py")
    assert not keep(record("Future exception was never retrieved", orbax))
    assert keep(record("Future exception was never retrieved", error_from("/mine/app.py")))
    assert keep(record("Task was destroyed but it is pending!", orbax))
