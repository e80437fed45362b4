// expect: unsupported element type
#include <kiln/kiln.hpp>

int main() {
  kiln::tensor<char> t;
  (void)t;
}
