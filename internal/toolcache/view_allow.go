package toolcache

// AllowsTool reports whether the job's allow/deny globs admit a tool named
// name that is not a server's (the agent loop's resource bridge), so that
// a job's globs cover every tool it is offered.
func (v *View) AllowsTool(name string) bool { return globsAllow(v.allow, v.deny, name) }
