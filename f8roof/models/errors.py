"""The models' one error family: a bad value from the user (an unknown GPU or recipe, a gemm
table with a hole, bytes no polynomial fits). The CLI reports these as one line, exit 2; any
other exception from the models is a bug and keeps its traceback. No click here: models depend
on nothing of ours."""


class ModelError(ValueError):
    pass
