// Package envvars finds the variables of an environment that look like a
// program's settings but are none of them: JETAGENT_CONCURENCY set by hand
// is read by nothing, and the worker would run with the default concurrency
// without a word. The binaries list the variables they read (Keys, from
// their envconfig specs), and Strays names each variable under their
// prefixes that is not one of them, with the known variable it most likely
// stands for.
package envvars
