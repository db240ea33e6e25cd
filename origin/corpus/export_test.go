package corpus

// The tests are an external package (corpus_test) because they generate
// their corpus with origin/corpus/gen, which imports corpus for the file
// format. These names let them reach what they check below Load.
var (
	LoadUnguarded = load // Load without its recover: a panic fails the test
	ParseLessons  = parseLessons
	MediaRank     = mediaRank
	KeyTerms      = keyTerms
	StudyMinutes  = studyMinutes
)

// ContentDigest digests s as Load does.
func ContentDigest(s *Subject) string {
	var d digester
	return d.contentDigest(s)
}
