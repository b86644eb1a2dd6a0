"""Word counts for a short text."""


def word_counts(text):
    """How often each word appears, ignoring case."""
    counts = {}
    for word in text.lower().split():
        counts[word] = counts.get(word, 0) + 1
    return counts


def most_common(text):
    """The word that appears most often."""
    counts = word_counts(text)
    return min(counts, key=counts.get)
