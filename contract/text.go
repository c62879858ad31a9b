package contract

import (
	"unicode"
	"unicode/utf8"
)

// Text that people read (a block's reason, shown to the callers it denies,
// in headers, logs, the status page and the audit trail) must show what it
// holds. A bidirectional control (U+202E RIGHT-TO-LEFT OVERRIDE, the
// isolates U+2066..U+2069) makes the text that follows it read in another
// order than it is stored, and an invisible format character (U+200B ZERO
// WIDTH SPACE, U+FEFF, U+00AD SOFT HYPHEN) makes two texts that look alike
// differ: both are Unicode's category Cf. So a text field holds one line of
// valid UTF-8 without control characters (Cc), format characters (Cf) or
// line and paragraph separators (Zl, Zp).

// ValidateText checks the human-readable text field named field: at most
// maxBytes of valid UTF-8 on one line, every character visible or a space.
func ValidateText(field, text string, maxBytes int) *Error {
	if len(text) > maxBytes || !utf8.ValidString(text) {
		return Invalid(field, "%s must be at most %d bytes of UTF-8", field, maxBytes)
	}
	for _, r := range text {
		if hiddenInText(r) {
			return Invalid(field, "%s must be one line of visible text: %U is a control, format or separator character (bidirectional controls and zero-width characters included)", field, r)
		}
	}
	return nil
}

// hiddenInText reports whether r changes how the text around it reads
// without showing itself: a control, format or separator character.
func hiddenInText(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}
