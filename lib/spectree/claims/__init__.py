"""How a claim is stated and judged: `claims.claim` with its statistical rules (`rules`) and verdict words (`verdicts`),
the diagnosis of a claim that does not hold (`diagnosis`), each paper claim once (`scorecard`), and the one name of each
speedup baseline and s_d/s_t that every claim and table uses (`names`)."""
