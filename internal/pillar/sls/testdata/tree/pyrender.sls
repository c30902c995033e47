#!py
def run():
    return {'a': 1}
