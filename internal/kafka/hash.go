package kafka

import "unicode/utf16"

// StringHashCode is Java's String.hashCode of s: 31·h + c over its UTF-16 code units,
// in int32 arithmetic.
func StringHashCode(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// Abs is Kafka's Utils.abs: the absolute value, with Integer.MIN_VALUE mapped to 0
// (Math.abs would leave it negative).
func Abs(n int32) int32 {
	switch {
	case n == -1<<31:
		return 0
	case n < 0:
		return -n
	}
	return n
}
