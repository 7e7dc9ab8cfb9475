package translate

// MatcherActions lets the external tests read the chain names a listener's
// filter_chain_matcher selects, as CheckReferences does.
var MatcherActions = matcherActions

var MatcherRanges = matcherRanges
