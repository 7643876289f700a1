"""Tests of protocol_json (standard library only): `python3 runners/test_protocol_json.py`.

The cases of json_cases.txt are lines and whether serde_json, ptecheck's reader, reads each as
JSON; `tests/protocol_json.rs` holds ptecheck's reader to the same file, so the two readers
agree on every line of it.
"""

import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import protocol_json  # noqa: E402


def cases():
    """The shared cases of json_cases.txt: (line, whether serde_json reads it as JSON)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "json_cases.txt")
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n") for line in f if not line.startswith("#")]
    return [(row[3:], row.startswith("ok ")) for row in rows]


ACCEPTED = [line for line, ok in cases() if ok]
REFUSED = [line for line, ok in cases() if not ok]


class Loads(unittest.TestCase):
    def test_what_serde_json_reads_is_read(self):
        for line in ACCEPTED:
            with self.subTest(line=line[:60]):
                protocol_json.loads(line.encode("utf-8"))

    def test_what_serde_json_refuses_is_refused(self):
        for line in REFUSED:
            with self.subTest(line=line[:60]):
                with self.assertRaises(ValueError):
                    protocol_json.loads(line.encode("utf-8", "surrogatepass"))

    def test_bytes_that_are_not_utf8_are_refused(self):
        for raw in [b'{"k": "\xed\xa0\x80"}', b'{"k": "\xff"}', '{"id": 1}'.encode("utf-16")]:
            with self.subTest(raw=raw):
                with self.assertRaises(ValueError):
                    protocol_json.loads(raw)

    def test_numbers_read_as_serde_json_reads_them(self):
        doc = protocol_json.loads(b'[-0, -0.0, 0, 7, 1.5, 9223372036854775808, -9223372036854775809]')
        self.assertEqual(math.copysign(1.0, doc[0]), -1.0)
        self.assertIsInstance(doc[0], float)
        self.assertEqual(math.copysign(1.0, doc[1]), -1.0)
        self.assertIsInstance(doc[2], int)
        self.assertEqual(doc[3], 7)
        self.assertEqual(doc[4], 1.5)
        self.assertIsInstance(doc[5], int)  # in u64
        self.assertIsInstance(doc[6], float)  # below i64


if __name__ == "__main__":
    unittest.main()
