// A source whose region starts and never ends (tests/slides: the build must refuse it).
// --8<-- [start:opened]
int answer() {
  return 42;
}
