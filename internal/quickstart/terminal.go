package quickstart

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether w is a character device (the live table then redraws in
// place).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// termSize is the terminal's columns and rows, 80×24 when unknown.
func termSize(w io.Writer) (cols, rows int) {
	if f, ok := w.(*os.File); ok {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 && ws.Row > 0 {
			return int(ws.Col), int(ws.Row)
		}
	}
	return 80, 24
}

// screenLines is how many terminal lines text takes at cols columns (long lines wrap).
func screenLines(text string, cols int) int {
	n := 0
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		n += max(1, (utf8.RuneCountInString(line)+cols-1)/cols)
	}
	return n
}

// redraw replaces the table drawn last (drawn terminal lines, 0 for none) by table,
// below the lines printed before it, and returns the lines table takes. Only the table is
// redrawn; when the last one did not fit on the screen the screen is cleared first.
func redraw(w io.Writer, table string, drawn int) int {
	cols, rows := termSize(w)
	switch {
	case drawn > 0 && drawn < rows:
		fmt.Fprintf(w, "\r\033[%dA\033[J", drawn) // up to the table's first line, clear below
	case drawn > 0:
		fmt.Fprint(w, "\033[H\033[2J")
	}
	fmt.Fprint(w, table)
	return screenLines(table, cols)
}
