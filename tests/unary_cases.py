# tests/unary_cases.py: reads tests/unary_cases.txt (the one fixture row of a unary float op) for the generators.
import os

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unary_cases.txt")


def lines(path):
    """the rows of a cases file: its lines stripped, without blank lines and # comments"""
    with open(path) as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.strip().startswith("#")]


def rows():
    """(name, torch function as written, lo, hi) per row of tests/unary_cases.txt"""
    out = []
    for line in lines(PATH):
        name, fn, rng = [p.strip() for p in line.split(" | ")]
        lo, hi = [float(v) for v in rng.split()]
        out.append((name, fn, lo, hi))
    return out
