import unittest

import calc


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(calc.add(2, 3), 5)

    def test_add_negative(self):
        self.assertEqual(calc.add(-2, -3), -5)

    def test_mul(self):
        self.assertEqual(calc.mul(4, 5), 20)

    def test_mul_zero(self):
        self.assertEqual(calc.mul(4, 0), 0)

    def test_div(self):
        self.assertEqual(calc.div(9, 3), 3)

    def test_div_by_zero(self):
        with self.assertRaises(ValueError):  # calc.div raises ZeroDivisionError: fails
            calc.div(1, 0)

    def test_hangs(self):
        calc.wait_forever()
