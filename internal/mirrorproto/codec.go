package mirrorproto

import "github.com/twmb/franz-go/pkg/kbin"

// This file holds the small encoder/decoder helpers every mirror RPC uses.
// All mirror RPCs are flexible (KIP-482) from version 0: strings and arrays
// are compact (length + 1 as an unsigned varint), and every struct ends with
// a tagged-field section (count, then tag, size, bytes per field, ascending
// tags). Unknown tags are skipped on read.

// writer appends flexible-version fields to a byte slice.
type writer struct{ b []byte }

func (w *writer) bool(v bool)     { w.b = kbin.AppendBool(w.b, v) }
func (w *writer) i8(v int8)       { w.b = kbin.AppendInt8(w.b, v) }
func (w *writer) i16(v int16)     { w.b = kbin.AppendInt16(w.b, v) }
func (w *writer) i32(v int32)     { w.b = kbin.AppendInt32(w.b, v) }
func (w *writer) i64(v int64)     { w.b = kbin.AppendInt64(w.b, v) }
func (w *writer) uuid(v [16]byte) { w.b = kbin.AppendUuid(w.b, v) }
func (w *writer) str(s string)    { w.b = kbin.AppendCompactString(w.b, s) }
func (w *writer) nstr(s *string)  { w.b = kbin.AppendCompactNullableString(w.b, s) }
func (w *writer) arr(n int)       { w.b = kbin.AppendCompactArrayLen(w.b, n) }
func (w *writer) noTags()         { w.b = kbin.AppendUvarint(w.b, 0) }
func (w *writer) strs(v []string) {
	w.arr(len(v))
	for _, s := range v {
		w.str(s)
	}
}
func (w *writer) i32s(v []int32) {
	w.arr(len(v))
	for _, x := range v {
		w.i32(x)
	}
}

// tags writes a tagged-field section; fields[i] is the encoded value of tag
// i, nil when the field holds its default and is left out.
func (w *writer) tags(fields ...[]byte) {
	n := 0
	for _, f := range fields {
		if f != nil {
			n++
		}
	}
	w.b = kbin.AppendUvarint(w.b, uint32(n))
	for tag, f := range fields {
		if f == nil {
			continue
		}
		w.b = kbin.AppendUvarint(w.b, uint32(tag))
		w.b = kbin.AppendUvarint(w.b, uint32(len(f)))
		w.b = append(w.b, f...)
	}
}

// field encodes one tagged field's value with fn.
func field(fn func(w *writer)) []byte {
	var w writer
	fn(&w)
	if w.b == nil {
		w.b = []byte{}
	}
	return w.b
}

// reader decodes flexible-version fields; like kbin.Reader it turns invalid
// after the first short read, and Complete reports that.
type reader struct{ kbin.Reader }

func newReader(src []byte) *reader { return &reader{kbin.Reader{Src: src}} }

func (r *reader) bool() bool     { return r.Bool() }
func (r *reader) i8() int8       { return r.Int8() }
func (r *reader) i16() int16     { return r.Int16() }
func (r *reader) i32() int32     { return r.Int32() }
func (r *reader) i64() int64     { return r.Int64() }
func (r *reader) uuid() [16]byte { return r.Uuid() }
func (r *reader) str() string    { return r.CompactString() }
func (r *reader) nstr() *string  { return r.CompactNullableString() }

// arr reads a compact array length; a null array reads as empty.
func (r *reader) arr() int {
	n := r.CompactArrayLen()
	if n < 0 {
		return 0
	}
	return int(n)
}

func (r *reader) strs() []string {
	n := r.arr()
	if n == 0 {
		return nil
	}
	v := make([]string, n)
	for i := range v {
		v[i] = r.str()
	}
	return v
}

func (r *reader) i32s() []int32 {
	n := r.arr()
	if n == 0 {
		return nil
	}
	v := make([]int32, n)
	for i := range v {
		v[i] = r.i32()
	}
	return v
}

// tags reads a tagged-field section, calling fn with a reader over each
// field's bytes; fields fn does not know are skipped.
func (r *reader) tags(fn func(tag uint32, f *reader)) {
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		tag := r.Uvarint()
		size := r.Uvarint()
		b := r.Span(int(size))
		if !r.Ok() {
			return
		}
		if fn == nil {
			continue
		}
		f := newReader(b)
		fn(tag, f)
		if f.Complete() != nil {
			r.Span(-1) // invalidate r
		}
	}
}

// skipTags reads a tagged-field section whose fields are all unknown.
func (r *reader) skipTags() { r.tags(nil) }

// readArray reads a compact array of n elements with fn; empty reads as nil.
func readArray[T any](r *reader, fn func(r *reader, v *T)) []T {
	n := r.arr()
	if n == 0 || !r.Ok() {
		return nil
	}
	v := make([]T, n)
	for i := range v {
		fn(r, &v[i])
	}
	return v
}

// writeArray writes a compact array, encoding each element with fn.
func writeArray[T any](w *writer, v []T, fn func(w *writer, v *T)) {
	w.arr(len(v))
	for i := range v {
		fn(w, &v[i])
	}
}
