package reflect

import "github.com/jetagent/jetagent/internal/llm"

// Transcript is a conversation as the model saw it plus the indirect
// invocations recorded while it ran: the input of reflection.
type Transcript struct {
	Messages []llm.Message `json:"messages"`
	Records  []Record      `json:"records,omitempty"`
}

// Reflected returns the messages with the records rewritten (see Rewrite).
func (t Transcript) Reflected() []llm.Message {
	return Rewrite(t.Messages, t.Records)
}
