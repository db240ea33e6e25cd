package id

// Tiers are the spec's tier values in canonical listing order.
var Tiers = []string{"topics", "college", "high", "middle", "primary"}

// ValidTier reports whether s is one of Tiers.
func ValidTier(s string) bool {
	for _, t := range Tiers {
		if t == s {
			return true
		}
	}
	return false
}

// TierRank is s's position in Tiers, or -1.
func TierRank(s string) int {
	for i, t := range Tiers {
		if t == s {
			return i
		}
	}
	return -1
}
