package schemas

import "embed"

// FS holds every *.schema.json file of this directory.
//
//go:embed *.schema.json
var FS embed.FS

// File names in FS.
const (
	Job        = "job.schema.json"
	Event      = "event.schema.json"
	Result     = "result.schema.json"
	State      = "state.schema.json"
	Transcript = "transcript.schema.json"
)

// Base is the URL prefix of every schema's $id; a schema's $id is Base + its
// file name, so one schema can $ref another by file name.
const Base = "https://jetagent.dev/schemas/"
