// Package merge is art's three-way merge engine over plain data: no store,
// no I/O.
//
// Text is a line-level three-way merge whose output, diff3-style conflict
// markers included, is byte-identical to `git merge-file --diff3 -p -L
// ours -L base -L theirs` (git 2.39, no configuration), and whose conflict
// count is that command's exit status (git caps it at 127). The engine is
// art's own, written from Myers' paper ("An O(ND) Difference Algorithm and
// Its Variations", 1986), git's documentation and black-box runs of the
// git binaries; diff.go describes the diff (which of the equally short
// edit scripts git's default diff picks decides the merge's hunks) and
// diff3.go the merge of the two diffs. Identity holds for every input git
// merge-file accepts, that is files with no NUL in their first 8000 bytes
// and under git's 1 GiB limit; the tests check it against the real command
// on generated inputs: random lines from small alphabets (many repeated
// lines, where tie-breaking matters), blank lines, CRLF and mixed line
// ends, missing final newlines, same changes on both sides,
// --ours/--theirs, files of 1,000-5,000 lines with hundreds of edits, and
// files of up to 40,000 lines with moved blocks (which drive the search
// past its cost thresholds); and the diff alone against `git diff
// --no-index --diff-algorithm=myers` on files of common lines amid
// rewritten ones and on long files with moved blocks.
//
// PlanTrees is the three-way merge of trees, path by path (see its doc for
// the rules); it leaves text merges of files both sides changed to the
// caller, which loads the contents, checks IsText and calls Text.
package merge
