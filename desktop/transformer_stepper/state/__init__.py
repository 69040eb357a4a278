"""What the app shows and the logic of its requests, without Qt (napari's `components`, glue's
viewer state): a ViewModel (model, trace, layer, head, selection, stage, temperature) and a
SessionModel (opening models, tracing typed text, interventions) that run their work through a
Scheduler and announce changes through a notify hook. `ui/` binds them to Qt: its ViewState
and Session emit a Qt signal for each notification and schedule on a QThreadPool and QTimers.
So the ordering of requests (latest wins, debounce, cancel, re-run) is tested here in
milliseconds, without a QApplication (tests/state/)."""
