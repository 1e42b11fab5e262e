// Package workspace moves a host directory into a store branch (Import,
// `art push -m`) and a store state back out to a host directory (Export,
// `art pull -m`).
//
// The workspace lives under /<name>/ in the store, name being the host
// directory's base name, as in the original art.
//
// Import is incremental: the import cache records, per path, what was
// imported (kind, mode, content) and the host stat it was read with;
// files whose stat is unchanged and not racy are skipped, racy ones are
// compared by content, changed files are re-chunked (only new chunks are
// stored), deletions are recorded. In capture mode (before every session)
// the same records tell a host change from a branch change per path
// (capture.go, docs/architecture.md "Capture"); art push -m is a capture
// too, and only push -m --replace (no Capture) makes the branch equal to
// the host, naming what it drops. Regular files,
// directories, symlinks, hard links, modes, ns mtimes and user.* xattrs are
// kept; fifos, sockets and devices are skipped with a warning and never
// opened.
//
// Export writes only what differs. It first walks the whole target state
// (so a malformed or hostile tree is refused before anything is written)
// into a plan (PlanExport: the host paths it changes, as plain data), which
// the caller can check against what the host has that the store does not
// (ExportPlan.HostChanges, pullcheck.go: art pull -m refuses to write over
// it), then stages every new file's verified content in a private directory
// inside the destination, and only then moves entries into place. Every host
// access goes through an os.Root, so no name in the store can reach outside
// the destination, through ".." or through a symlink.
//
// Sandbox policy (.art/config/) is never written by Export: it must come
// from the host user, not from anything the agent could have changed.
package workspace
