"""Writes the .npy files of test/cli/npy-inputs.test into DIR, header by
hand (numpy would refuse to write most of them): npy_files.py DIR."""
import pathlib
import struct
import sys

out = pathlib.Path(sys.argv[1])


def npy(name, descr, shape, data):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    (out / name).write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)


two = struct.pack("<2d", 1.5, 3.0)
npy("good.npy", "<f8", "(2,)", two)
npy("trailing.npy", "<f8", "(2,)", two + b"extra")
npy("big.npy", "<f8", "(536870912,)", two)  # 4 GiB declared
npy("overflow.npy", "<f8", "(1099511627776, 1099511627776)", two)
