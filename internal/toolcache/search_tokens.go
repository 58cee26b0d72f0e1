package toolcache

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// The analysis of tool texts and requests into words.

// tokens splits text into lower-case words: on anything that is not a
// letter or digit, and at camelCase and letter/digit boundaries; common
// English stop words are dropped. With join, a word split at such
// boundaries is also kept whole ("GitHub" -> git, hub, github), so it
// matches both spellings. With cjk, runs of Han, kana or Hangul become
// overlapping character bigrams ("八字信息" -> 八字, 字信, 信息). Data is
// skipped: a run of more than maxWordBytes ASCII letters and digits, or
// more than maxChunkBytes of ASCII without white space.
func tokens(text string, cjk, join bool) []string { return tokensInto(nil, text, cjk, join) }

func tokensInto(out []string, text string, cjk, join bool) []string {
	eachToken(text, cjk, join, func(w string) bool {
		out = append(out, w)
		return true
	})
	return out
}

// eachToken calls yield with each token of text (see tokens) until yield
// returns false. One pass over the bytes, ASCII without decoding; a token
// is a substring of text, lower-cased only when it has upper-case letters,
// so an ordinary lower-case word costs no allocation.
func eachToken(text string, cjk, join bool, yield func(w string) bool) {
	stop := false
	emit := func(w string) {
		w = lowerWord(w)
		// Single letters ("s" of "repository's") carry no meaning; digits do.
		if !stop && !stopWords[w] && (len(w) != 1 || w[0] < 'a' || w[0] > 'z') {
			stop = !yield(w)
		}
	}
	pieceStart, wordStart := -1, -1 // byte offsets; -1: none open
	parts := 0
	inCJK := false
	var prev rune
	flush := func(end int) {
		if pieceStart < 0 {
			return
		}
		piece := text[pieceStart:end]
		if inCJK {
			// Overlapping bigrams of the run (the run itself when it is one
			// character).
			if _, size := utf8.DecodeRuneInString(piece); size == len(piece) && !stop {
				stop = !yield(piece)
			}
			for i := 0; i < len(piece); {
				_, s1 := utf8.DecodeRuneInString(piece[i:])
				if i+s1 >= len(piece) {
					break
				}
				_, s2 := utf8.DecodeRuneInString(piece[i+s1:])
				if !stop {
					stop = !yield(piece[i : i+s1+s2])
				}
				i += s1
			}
		} else {
			emit(piece)
			parts++
		}
		pieceStart = -1
	}
	endWord := func(end int) {
		flush(end)
		if join && parts > 1 {
			emit(text[wordStart:end])
		}
		wordStart, parts = -1, 0
	}
	for i := 0; i < len(text) && !stop; {
		if (i == 0 || isSpace(text[i-1])) && !isSpace(text[i]) {
			// Over maxChunkBytes of ASCII without a space is data (an
			// encoded file, a minified script), not text: skipped whole.
			if j, ascii := chunkEnd(text, i); ascii && j-i > maxChunkBytes {
				i = j
				continue
			}
		}
		r, size := rune(text[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(text[i:])
		}
		if !isLetterOrDigit(r) {
			endWord(i)
			i += size
			continue
		}
		if c := cjk && isCJK(r); c != inCJK {
			endWord(i)
			inCJK = c
		}
		if wordStart < 0 && !inCJK {
			// A run of ASCII letters and digits longer than maxWordBytes is
			// data (base64, a digest), not a word: skipped whole rather than
			// split into case pieces.
			if j := asciiWordEnd(text, i); j-i > maxWordBytes && (j == len(text) || text[j] < utf8.RuneSelf) {
				i = j
				continue
			}
		}
		if pieceStart >= 0 && !inCJK {
			switch {
			case isLower(prev) && isUpper(r):
				flush(i)
			case isUpper(prev) && isUpper(r) && nextIsLower(text[i+size:]):
				flush(i) // "HTTPServer" -> HTTP, Server
			case isDigit(prev) != isDigit(r):
				flush(i)
			}
		}
		if pieceStart < 0 {
			pieceStart = i
		}
		if wordStart < 0 && !inCJK {
			wordStart = i
		}
		prev = r
		i += size
	}
	if !stop {
		endWord(len(text))
	}
}

// maxWordBytes is the longest run of letters and digits taken as a word
// (the longest identifiers of tool catalogs are about half of it).
const maxWordBytes = 64

// maxChunkBytes is the longest stretch of ASCII without white space taken
// as text (longer than most URLs).
const maxChunkBytes = 256

// asciiWordEnd is the end of the run of ASCII letters and digits starting
// at text[i].
func asciiWordEnd(text string, i int) int {
	for i < len(text) {
		if text[i] >= utf8.RuneSelf || !isLetterOrDigit(rune(text[i])) {
			break
		}
		i++
	}
	return i
}

// chunkEnd is the end of the stretch without white space starting at
// text[i], and whether it is all ASCII.
func chunkEnd(text string, i int) (int, bool) {
	for ; i < len(text) && !isSpace(text[i]); i++ {
		if text[i] >= utf8.RuneSelf {
			return i, false
		}
	}
	return i, true
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'
}

// lowerWord is w in lower case, w itself when it has no upper-case letter.
func lowerWord(w string) string {
	for i := 0; i < len(w); i++ {
		c := w[i]
		if c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			return strings.ToLower(w)
		}
	}
	return w
}

func isLetterOrDigit(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

func isLower(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z'
	}
	return unicode.IsLower(r)
}

func isUpper(r rune) bool {
	if r < utf8.RuneSelf {
		return 'A' <= r && r <= 'Z'
	}
	return unicode.IsUpper(r)
}

func isDigit(r rune) bool {
	if r < utf8.RuneSelf {
		return '0' <= r && r <= '9'
	}
	return unicode.IsDigit(r)
}

// nextIsLower says whether s starts with a lower-case letter.
func nextIsLower(s string) bool {
	if s == "" {
		return false
	}
	r := rune(s[0])
	if r >= utf8.RuneSelf {
		r, _ = utf8.DecodeRuneInString(s)
	}
	return isLower(r)
}

func isCJK(r rune) bool {
	if r < 0x1100 { // below Hangul Jamo, the first of these blocks
		return false
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// foldPlural folds simple English plurals ("files" -> "file"): the
// analysis without the stemmer, kept for comparison.
func foldPlural(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us"):
		return w[:len(w)-1]
	}
	return w
}

// stopWords are dropped before stemming.
var stopWords = map[string]bool{
	"a": true, "an": true, "the": true, "and": true, "or": true, "of": true, "to": true,
	"in": true, "on": true, "for": true, "with": true, "by": true, "is": true, "are": true,
	"be": true, "this": true, "that": true, "it": true, "as": true, "at": true, "from": true,
	"i": true, "me": true, "my": true, "can": true, "you": true, "your": true, "will": true,
}
