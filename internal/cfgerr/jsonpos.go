package cfgerr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"unicode/utf8"
)

var utf8BOM = []byte("\ufeff")

// JSONPosition says where in data the JSON syntax error in err's chain
// (a *json.SyntaxError, whose Offset counts bytes of data) is, as an
// editor shows it: "line 3, column 27" (columns count characters, from 1).
// ok is false when err holds no syntax error or its offset is not in data.
func JSONPosition(err error, data []byte) (pos string, ok bool) {
	var se *json.SyntaxError
	if !errors.As(err, &se) || se.Offset < 0 || se.Offset > int64(len(data)) {
		return "", false
	}
	// Offset is just past the byte at fault (its end, for an unexpected
	// end of input): the position shown is that byte's.
	at := int(se.Offset)
	if at > 0 {
		at--
	}
	before := data[:at]
	line := bytes.Count(before, []byte("\n")) + 1
	col := utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
	if line == 1 && bytes.HasPrefix(data, utf8BOM) && at >= len(utf8BOM) {
		// A UTF-8 byte order mark (a file saved "UTF-8 with BOM", which
		// toolcache's loader reads as spaces) is no column in an editor.
		col--
	}
	return fmt.Sprintf("line %d, column %d", line, col), true
}

// InJSONFile is err with the place of its JSON syntax error in the file
// at path added ("... (at line 3, column 27)"): encoding/json names only a
// byte offset, and a hand-edited config file is read by line. err is
// returned as it is when it holds no syntax error or path cannot be read.
func InJSONFile(err error, path string) error {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return err
	}
	data, rerr := os.ReadFile(path)
	if rerr != nil {
		return err
	}
	if pos, ok := JSONPosition(err, data); ok {
		return fmt.Errorf("%w (at %s)", err, pos)
	}
	return err
}
