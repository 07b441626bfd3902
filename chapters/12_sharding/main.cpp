#include <dist/dist.h>
int main() {
  return 0;
}
