// Package textdist measures how far apart two short strings are, for the
// "did you mean" of mistyped names: tool names a model wrote, submit's
// subcommands, keys of the MCP servers file.
package textdist
