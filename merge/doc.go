// Package merge is art's three-way merge engine over plain data: no store,
// no I/O.
//
// Text is a line-level three-way merge whose output, diff3-style conflict
// markers included, is byte-identical to `git merge-file --diff3 -p -L
// ours -L base -L theirs` (git 2.39, no configuration), and whose conflict
// count is that command's exit status (git caps it at 127). It gets there
// by transcribing the parts of git's xdiff that command runs (xdiff.go):
// git's Myers diff with its discarding of unmatchable lines, its cost
// heuristics and tie-breaking, its change compaction without the indent
// heuristic, and xdl_do_merge at the EAGER level that diff3 style caps to
// (adjacent changes conflict; identical changes on both sides do not).
// Identity holds for every input git merge-file accepts, that is files
// with no NUL in their first 8000 bytes and under git's 1 GiB limit; the
// tests check it against the real command on generated inputs: random
// lines from small alphabets (many repeated lines, where tie-breaking
// matters), blank lines, CRLF and mixed line ends, missing final newlines,
// same changes on both sides, --ours/--theirs, files of 1,000-5,000 lines
// with hundreds of edits, and files of up to 40,000 lines with moved blocks
// (which drive the search past its cost thresholds).
//
// PlanTrees is the three-way merge of trees, path by path (see its doc for
// the rules); it leaves text merges of files both sides changed to the
// caller, which loads the contents, checks IsText and calls Text.
package merge
