// Linked with one layer's whole archive and the layers below it: building it is the check.
int main() {
  return 0;
}
