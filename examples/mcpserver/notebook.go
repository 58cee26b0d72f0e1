package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// note is one stored note.
type note struct {
	ID    string   `json:"id"`
	Title string   `json:"title"`
	Body  string   `json:"body"`
	Tags  []string `json:"tags"`
}

// errNoNote is returned for an unknown note ID.
var errNoNote = errors.New("no such note")

// notebook is the server's in-memory note store. onChange runs under the
// lock whenever the store goes from empty to non-empty or back, so that the
// tool list it drives cannot disagree with the store.
type notebook struct {
	mu       sync.Mutex
	notes    []note
	next     int
	onChange func(empty bool)
}

func (n *notebook) create(title, body string, tags []string) note {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.next++
	nt := note{ID: fmt.Sprintf("n%d", n.next), Title: title, Body: body, Tags: slices.Clone(tags)}
	if nt.Tags == nil {
		nt.Tags = []string{}
	}
	n.notes = append(n.notes, nt)
	if len(n.notes) == 1 && n.onChange != nil {
		n.onChange(false)
	}
	return nt
}

func (n *notebook) delete(id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	i := slices.IndexFunc(n.notes, func(nt note) bool { return nt.ID == id })
	if i < 0 {
		return fmt.Errorf("%w: %q", errNoNote, id)
	}
	n.notes = slices.Delete(n.notes, i, i+1)
	if len(n.notes) == 0 && n.onChange != nil {
		n.onChange(true)
	}
	return nil
}

// search returns up to limit notes whose title or body contains query
// (case-insensitively; an empty query matches all) and whose tags include
// any, or with matchAll all, of tags.
func (n *notebook) search(query string, limit int, tags []string, matchAll bool) []note {
	n.mu.Lock()
	defer n.mu.Unlock()
	q := strings.ToLower(query)
	found := []note{}
	for _, nt := range n.notes {
		if len(found) == limit {
			break
		}
		if q != "" && !strings.Contains(strings.ToLower(nt.Title), q) && !strings.Contains(strings.ToLower(nt.Body), q) {
			continue
		}
		if !tagsMatch(nt.Tags, tags, matchAll) {
			continue
		}
		found = append(found, nt)
	}
	return found
}

func tagsMatch(have, want []string, all bool) bool {
	if len(want) == 0 {
		return true
	}
	if all {
		return !slices.ContainsFunc(want, func(w string) bool { return !slices.Contains(have, w) })
	}
	return slices.ContainsFunc(want, func(w string) bool { return slices.Contains(have, w) })
}

func (n *notebook) list() []note {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.notes)
}
