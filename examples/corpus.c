/* The built-in corpus (see corpus.h).
 *
 * Words from a fixed vocabulary, mostly in "phrases" (2-5 words drawn once
 * from the fixed seed), chosen with a skewed distribution by an xorshift64*
 * generator; sentences with capitals, commas and end marks, lines of 50-79
 * columns, now and then a number or a blank line. Each 1 MiB segment
 * restarts the generator from a seed made from the segment's index (and
 * starts a new sentence), so corpus_new() can start anywhere: it skips at
 * most one segment's worth of lines, never the bytes before it. */
#include "corpus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const vocab[] = {
    "the", "of", "and", "to", "a", "in", "is", "it", "that", "for", "was", "on", "with",
    "as", "he", "be", "at", "by", "this", "had", "not", "are", "but", "from", "or",
    "have", "an", "they", "which", "one", "you", "were", "her", "all", "she", "there",
    "would", "their", "we", "him", "been", "has", "when", "who", "will", "more", "no",
    "if", "out", "so", "said", "what", "up", "its", "about", "into", "than", "them",
    "can", "only", "other", "new", "some", "could", "time", "these", "two", "may",
    "then", "do", "first", "any", "my", "now", "such", "like", "our", "over", "man",
    "me", "even", "most", "made", "after", "also", "did", "many", "before", "must",
    "through", "back", "years", "where", "much", "your", "way", "well", "down",
    "should", "because", "each", "just", "those", "people", "how", "too", "little",
    "state", "good", "very", "make", "world", "still", "own", "see", "men", "work",
    "long", "get", "here", "between", "both", "life", "being", "under", "never", "day",
    "same", "another", "know", "while", "last", "might", "us", "great", "old", "year",
    "off", "come", "since", "against", "go", "came", "right", "used", "take", "three",
    "states", "himself", "few", "house", "use", "during", "without", "again", "place",
    "around", "however", "home", "small", "found", "thought", "went", "say", "part",
    "once", "general", "high", "upon", "school", "every", "does", "got", "united",
    "left", "number", "course", "war", "until", "always", "away", "something", "fact",
    "though", "water", "less", "public", "put", "think", "almost", "hand", "enough",
    "far", "took", "head", "yet", "government", "system", "better", "set", "told",
    "nothing", "night", "end", "why", "called", "didn't", "eyes", "find", "going",
    "look", "asked", "later", "knew", "point", "next", "program", "city", "business",
    "give", "group", "toward", "young", "days", "let", "room", "president", "side",
    "social", "present", "given", "several", "order", "national", "second", "possible",
    "rather", "per", "face", "among", "form", "important", "often", "things", "looked",
    "early", "white", "case", "John", "become", "large", "big", "need", "four",
    "within", "felt", "along", "children", "saw", "best", "church", "ever", "least",
    "power", "development", "light", "thing", "seemed", "family", "interest", "want",
    "members", "mind", "country", "area", "others", "although", "turned", "done",
    "open", "God", "service", "problem", "certain", "kind", "different", "thus",
    "began", "door", "help", "means", "sense", "whole", "matter", "perhaps", "itself",
    "York", "times", "law", "human", "line", "above", "name", "example", "action",
    "company", "hands", "local", "show", "whether", "five", "history", "gave", "today",
    "either", "act", "feet", "across", "taken", "past", "quite", "anything", "seen",
    "having", "death", "experience", "body", "word", "half", "really", "field", "am",
    "car", "words", "already", "themselves", "information", "tell", "together",
    "college", "shall", "money", "period", "held", "keep", "sure", "probably", "free",
    "seems", "political", "real", "behind", "question", "air", "office", "making",
    "brought", "whose", "special", "major", "heard", "problems", "federal", "became",
    "study", "ago", "moment", "available", "known", "result", "street", "economic",
    "boy", "position", "reason", "change", "south", "board", "individual", "job",
    "areas", "society", "west", "close", "turn", "love", "community", "true", "court",
    "force", "full", "seem", "wife", "future", "age", "voice", "center", "woman",
    "control", "common", "policy", "necessary", "following", "front", "sometimes",
    "six", "girl", "clear", "further", "land", "run", "students", "provide", "feel",
    "party", "able", "mother", "music", "education", "university", "child", "effect",
    "level", "stood", "military", "short", "town", "morning", "total", "outside",
    "rate", "figure", "class", "art", "century", "Washington", "north", "usually",
    "plan", "leave", "therefore", "evidence", "top", "million", "sound", "black",
    "strong", "hard", "various", "says", "believe", "type", "value", "play", "surface",
    "soon", "mean", "near", "lines", "table",
};
#define NVOCAB (sizeof vocab / sizeof vocab[0])
#define NPHRASES 4096
#define PHRASE_MAX 64
#define SEED 0x9E3779B97F4A7C15ULL

struct corpus {
    uint64_t rng;
    uint64_t left;     /* bytes still to produce */
    uint64_t segment;  /* index of the current segment */
    uint64_t seg_left; /* bytes of it still to produce */
    int sentence_left, capital;
    size_t pos, len; /* the current line: line[pos, len) not yet produced */
    char line[512];
    unsigned char vlen[NVOCAB];
    unsigned char plen[NPHRASES];
    char phrase[NPHRASES][PHRASE_MAX];
};

static uint64_t corpus_rand(corpus *c) {
    uint64_t x = c->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    c->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* An index in [0, n), skewed towards 0 (density ~ 1/sqrt). */
static size_t skewed(uint64_t r, size_t n) {
    uint64_t u = (r >> 16) & 0xffff;
    return (size_t)((((u * u) >> 16) * n) >> 16);
}

/* splitmix64's finaliser: well-spread seeds from consecutive indices. */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Positions the generator at the start of segment s. */
static void segment_start(corpus *c, uint64_t s) {
    c->segment = s;
    c->seg_left = CORPUS_SEGMENT;
    c->rng = mix64(SEED + (s + 1) * 0x9E3779B97F4A7C15ULL) | 1; /* never 0 */
    c->sentence_left = 10;
    c->capital = 1;
    c->pos = c->len = 0;
}

static void corpus_line(corpus *c) {
    uint64_t r = corpus_rand(c);
    size_t width = 50 + r % 30, n = 0;
    char *p = c->line;
    while (n < width) { /* each step adds at most ~75 bytes: fits in 512 */
        r = corpus_rand(c);
        if (n) p[n++] = ' ';
        size_t start = n;
        if ((r & 63) == 0) {
            unsigned v = (unsigned)((r >> 8) % 100000) >> ((r >> 40) % 12);
            n += (size_t)snprintf(p + n, 16, "%u", v);
        } else if ((r & 3) != 0) {
            size_t i = skewed(r, NPHRASES);
            memcpy(p + n, c->phrase[i], c->plen[i]);
            n += c->plen[i];
        } else {
            size_t w = skewed(r, NVOCAB);
            memcpy(p + n, vocab[w], c->vlen[w]);
            n += c->vlen[w];
        }
        if (c->capital) {
            if (p[start] >= 'a' && p[start] <= 'z') p[start] = (char)(p[start] - 32);
            c->capital = 0;
        }
        if (--c->sentence_left <= 0) {
            unsigned k = (unsigned)(r >> 58);
            p[n++] = k < 52 ? '.' : k < 58 ? '?' : k < 62 ? '!' : ';';
            c->sentence_left = 4 + (int)((r >> 32) % 14);
            c->capital = 1;
        } else if (((r >> 36) & 15) == 0) {
            p[n++] = ',';
        }
    }
    p[n++] = '\n';
    if (c->capital && ((r >> 44) & 7) == 0) p[n++] = '\n';
    c->pos = 0;
    c->len = n;
}

/* Produces n bytes into buf, or skips them when buf is NULL; n is at most
 * what is left. */
static void produce(corpus *c, unsigned char *buf, uint64_t n) {
    for (uint64_t done = 0; done < n;) {
        if (c->seg_left == 0) segment_start(c, c->segment + 1);
        if (c->pos == c->len) corpus_line(c);
        uint64_t k = c->len - c->pos;
        if (k > n - done) k = n - done;
        if (k > c->seg_left) k = c->seg_left; /* the last line is cut off */
        if (buf != NULL) memcpy(buf + done, c->line + c->pos, (size_t)k);
        c->pos += (size_t)k;
        c->seg_left -= k;
        done += k;
    }
}

corpus *corpus_new(uint64_t offset, uint64_t bytes) {
    corpus *c = calloc(1, sizeof *c);
    if (c == NULL) return NULL;
    /* The phrases come from the fixed seed, the same for every segment. */
    c->rng = SEED;
    for (size_t i = 0; i < NVOCAB; i++) c->vlen[i] = (unsigned char)strlen(vocab[i]);
    for (size_t i = 0; i < NPHRASES; i++) {
        size_t words = 2 + corpus_rand(c) % 4, n = 0;
        for (size_t j = 0; j < words; j++) {
            size_t w = skewed(corpus_rand(c), NVOCAB);
            if (n + c->vlen[w] + 1 >= PHRASE_MAX) break;
            if (n) c->phrase[i][n++] = ' ';
            memcpy(c->phrase[i] + n, vocab[w], c->vlen[w]);
            n += c->vlen[w];
        }
        c->plen[i] = (unsigned char)n;
    }
    segment_start(c, offset / CORPUS_SEGMENT);
    produce(c, NULL, offset % CORPUS_SEGMENT); /* into the segment */
    c->left = bytes;
    return c;
}

size_t corpus_fill(corpus *c, unsigned char *buf, size_t n) {
    if (n > c->left) n = (size_t)c->left;
    produce(c, buf, n);
    c->left -= n;
    return n;
}

void corpus_free(corpus *c) { free(c); }
