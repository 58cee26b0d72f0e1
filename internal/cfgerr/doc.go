// Package cfgerr is the one error type for invalid configuration across
// jetagent's libraries. Each library validates its own Config and names the
// field at fault (a Go field path such as "Topology.AckWait"); the binaries
// map field paths to the environment variables or flags that set them, so
// an operator is told which variable to fix, and no library has to know
// how it is configured. JSONPosition and InJSONFile turn a JSON syntax
// error's byte offset into the line and column of a hand-edited file.
package cfgerr
