"""The fill-mask demo: its choice of hidden word."""

from tokenmask.use.fill import demo_word


def test_demo_word_is_an_alphabetic_word_fixed_by_the_line():
    line = "To be, or not to be: 42 -- that is the question."
    words = line.split()
    picked = demo_word(words, line)
    assert words[picked].strip(".,;:!?'\"").isalpha()
    assert demo_word(words, line) == picked  # the same line hides the same word
    lines = [f"word{i} alpha beta gamma delta epsilon" for i in range(200)]
    chosen = {demo_word(text.split(), text) for text in lines}
    assert chosen == {1, 2, 3, 4, 5}  # spread over the alphabetic words, never 'word17'


def test_demo_word_falls_back_to_any_word():
    assert demo_word(["42", "--"], "42 --") in (0, 1)
