"""What a run publishes: RESULTS.md from each notebook's summary.json (`results`, its figures `result_figures`, the
scorecard `scorecard_text`), README's pictures (`gallery`) and each notebook's self-contained HTML report (`export`)."""
