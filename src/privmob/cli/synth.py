"""placeholder until data2 lands"""


def register(app):
    pass
