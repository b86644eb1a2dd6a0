import unittest

from tally import most_common, word_counts


class TallyTest(unittest.TestCase):
    def test_counts(self):
        self.assertEqual(word_counts("a B b"), {"a": 1, "b": 2})

    def test_most_common(self):
        self.assertEqual(most_common("the cat saw the dog"), "the")
